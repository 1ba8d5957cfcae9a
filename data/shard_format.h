/* llm.c's token shard format: a header of 256 little-endian int32, then
 * uint16 tokens. header[0] = magic, header[1] = version, header[2] = count. */
#ifndef DATA_SHARD_FORMAT_H
#define DATA_SHARD_FORMAT_H

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256
#define SHARD_HEADER_BYTES (SHARD_HEADER_INTS * 4)
#define GPT2_EOT_TOKEN 50256

#endif
