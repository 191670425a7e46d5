'use strict';
/**
 * The idempotency store: `idempotencyKey` -> the answer it got.
 *
 * MAKE THIS DURABLE BEFORE PRODUCTION. This one is in memory: a restart forgets every key, so a
 * call the runtime sent before the restart would run the action again if it came back, and two
 * processes behind one endpoint do not share it. Keep the same three operations on your
 * database, in the same transaction as the action where you can (for example a table
 * `idempotency(key PRIMARY KEY, fingerprint, status, body, created_at)`: `begin` is an insert
 * that does nothing on conflict and returns the existing row, `finish` an update, `abandon` a
 * delete), and expire rows no sooner than a retained context can repeat a call (the runtime
 * keeps contexts 15 minutes; a day is a comfortable margin).
 */

/** Answers kept in memory; the oldest finished ones are forgotten first. */
const LIMIT = 10000;

class IdempotencyStore {
  constructor(limit = LIMIT) {
    this.records = new Map(); // key -> {fingerprint, answer: {status, body} or null while running}
    this.limit = limit;
  }

  /** null when `key` is new (it is now reserved: run the handler, then `finish`); else the
   * key's record (finished, or `answer` null while it runs). `fingerprint` is the sha256 of the
   * arguments: the same key with other arguments is refused. */
  async begin(key, fingerprint) {
    const found = this.records.get(key);
    if (found !== undefined) return found;
    this.records.set(key, { fingerprint, answer: null });
    this.forgetOld();
    return null;
  }

  /** `answer` is {status, body}: the HTTP answer exactly as sent. */
  async finish(key, answer) {
    this.records.get(key).answer = answer;
  }

  /** The handler never answered (the server stopped): the key is free again. */
  async abandon(key) {
    this.records.delete(key);
  }

  forgetOld() {
    if (this.records.size <= this.limit) return;
    for (const [key, record] of this.records) {
      if (record.answer !== null) {
        this.records.delete(key);
        return;
      }
    }
  }
}

module.exports = { IdempotencyStore };
