"""Schema of the JSON body of a `Completed request:` line (KIP-673, Kafka 2.8 to 4.x).

One union schema covers PRODUCE and FETCH so each line is parsed once. Field names and types follow
the generated JSON converters (`*JsonConverter.write`, records elided as `recordsSizeInBytes`):
Produce v3-v13 (`name` up to v12, `topicId` from v13), Fetch v4-v17 (`replicaId` up to v14,
`replicaState.replicaId` from v15; `topic` up to v12, `topicId` from v13). Fields not listed here are
ignored by the parser.
"""

REQUEST_LOG_JSON_DDL = """
isForwarded boolean,
requestHeader struct<
  requestApiKey: int, requestApiVersion: int, correlationId: int, clientId: string, requestApiKeyName: string>,
request struct<
  transactionalId: string, acks: int, timeoutMs: int,
  topicData: array<struct<name: string, topicId: string,
    partitionData: array<struct<index: int, recordsSizeInBytes: int>>>>,
  replicaId: int, replicaState: struct<replicaId: int, replicaEpoch: bigint>,
  maxWaitMs: int, minBytes: int, maxBytes: int, isolationLevel: int, sessionId: int, sessionEpoch: int,
  topics: array<struct<topic: string, topicId: string,
    partitions: array<struct<partition: int, currentLeaderEpoch: int, fetchOffset: bigint,
      lastFetchedEpoch: int, logStartOffset: bigint, partitionMaxBytes: int>>>>,
  forgottenTopicsData: array<struct<topic: string, topicId: string, partitions: array<int>>>,
  rackId: string>,
response struct<
  throttleTimeMs: int, errorCode: int, sessionId: int,
  responses: array<struct<name: string, topic: string, topicId: string,
    partitionResponses: array<struct<index: int, errorCode: int, baseOffset: bigint,
      logAppendTimeMs: bigint, logStartOffset: bigint, errorMessage: string>>,
    partitions: array<struct<partitionIndex: int, errorCode: int, highWatermark: bigint,
      lastStableOffset: bigint, logStartOffset: bigint,
      divergingEpoch: struct<epoch: int, endOffset: bigint>, recordsSizeInBytes: int>>>>>,
connection string,
totalTimeMs double, requestQueueTimeMs double, localTimeMs double, remoteTimeMs double,
throttleTimeMs bigint, responseQueueTimeMs double, sendTimeMs double,
securityProtocol string, principal string, listener string,
clientInformation struct<softwareName: string, softwareVersion: string>,
temporaryMemoryBytes bigint, messageConversionsTime double,
_corrupt_record string
"""

# KRaft's metadata log (`__cluster_metadata`) has this fixed topic id (Uuid.METADATA_TOPIC_ID).
METADATA_TOPIC_NAME = "__cluster_metadata"
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
