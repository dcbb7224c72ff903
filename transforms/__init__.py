"""Pure DataFrame -> DataFrame transformations: no reads, writes, actions or SparkSession."""
