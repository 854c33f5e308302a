"""The shared base package: files, locks, runs, records, statistics, tables, CLI helpers, shards, the
generation engine (``loadbearing.engine``), question loaders (``loadbearing.questions``) and the answer
parser. It imports no stage. Importing it loads no model."""
