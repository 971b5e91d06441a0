package block

import "hash/crc32"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the block checksum used at rest and on the wire: CRC-32C
// (Castagnoli), which Go computes with the CPU's crc32 instructions at many
// GB/s, detects all burst errors up to 32 bits, and is what NVMe and iSCSI
// use for the same job.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// UpdateChecksum continues a running checksum over more bytes.
func UpdateChecksum(sum uint32, b []byte) uint32 { return crc32.Update(sum, castagnoli, b) }
