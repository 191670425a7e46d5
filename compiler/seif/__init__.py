"""The `.seif` front end: the grammar's parser and keywords, parse and lower to the JSON document,
syntax hints, the printer and the formatter."""
