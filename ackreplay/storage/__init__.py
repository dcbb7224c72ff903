"""Where data is read and written, for every stage: input discovery (`inputs`), reading input files in
Python tasks (`line_reader`, `fingerprint`), the lakehouse's Delta tables (`lakehouse`, `arrow_delta`) and
their names in a metastore (`metastore`)."""
