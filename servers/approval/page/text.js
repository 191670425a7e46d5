"use strict";
/* What the approvers' page counts as invisible: the characters that render as nothing or as a
   blank. The same definition as servers/support/visible.py
   (tests/servers/approval/test_visible_text.py checks the two agree on every code point both
   Unicode versions know alike): controls, format characters, line and paragraph separators, every
   space, private use, surrogates, unassigned code points, default-ignorable code points, nonspacing
   and enclosing marks, and the blanks that are symbols by category (the braille blank U+2800, the
   musical null notehead U+1D159). */

const CLASS = "[\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}\\p{Co}\\p{Cs}\\p{Cn}\\p{Zs}\\p{Mn}\\p{Me}"
  + "\\p{Default_Ignorable_Code_Point}\\u{2800}\\u{1D159}]";
const ONE = new RegExp(`^${CLASS}$`, "u");
const ESCAPED = new RegExp(`(?![ \\n])${CLASS}`, "gu"); // JSON text's own space and line feed

/** Whether the one character `char` renders as nothing or as a blank. */
export function invisible(char) {
  return ONE.test(char);
}

/** Whether any character of `text` shows. */
export function hasVisible(text) {
  for (const char of text) if (!invisible(char)) return true;
  return false;
}

/** `text` with every invisible character but U+0020 and U+000A as a visible \uXXXX escape (one
    per UTF-16 unit: a character beyond U+FFFF as its surrogate pair, as JSON writes it). */
export function escapeInvisible(text) {
  return text.replace(ESCAPED, (char) => {
    const units = [];
    for (let i = 0; i < char.length; i++) units.push(char.charCodeAt(i));
    return units.map((unit) => `\\u${unit.toString(16).padStart(4, "0")}`).join("");
  });
}
