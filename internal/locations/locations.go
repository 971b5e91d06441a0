// Package locations is the wire vocabulary of ctxtier's GetObjectLocations
// S3 extension (docs/s3.md): the query that asks which members hold an
// object's data blocks, and the XML answer. The S3 endpoint
// (gateway/s3api) writes it; the weights puller (internal/weights) reads it
// to send each ranged GET to a node holding its bytes.
package locations

import "encoding/xml"

// Query is the query parameter of ctxtier's GetObjectLocations
// extension: GET /BUCKET/KEY?ctxtier-locations[&offset=N][&max-blocks=M]
// lists the data blocks of an object (of an object namespace) from byte N
// on, at most M of them (1..MaxBlocks, default the maximum), and
// the members holding each one's shards, so a client can send each ranged
// GET to a node that holds its bytes (docs/s3.md). Authenticated and
// scoped like a GetObject of the same key.
const Query = "ctxtier-locations"

// MaxBlocks bounds the blocks one GetObjectLocations answer lists.
const MaxBlocks = 1000

// Locations is GetObjectLocations' answer (XML, like S3's own).
type Locations struct {
	XMLName xml.Name `xml:"ObjectLocations"`
	// Node is the answering node's member ID ("" when not clustered).
	Node   string  `xml:"Node"`
	Size   int64   `xml:"Size"`
	ETag   string  `xml:"ETag"`
	Blocks []Block `xml:"Block"`
	// Truncated: more blocks follow; ask again from NextOffset.
	Truncated  bool   `xml:"IsTruncated"`
	NextOffset *int64 `xml:"NextOffset,omitempty"`
}

// Block is one data block: the object's bytes [Offset,
// Offset+Length), its erasure code's data shard count (1: every holder has
// the whole block) and its shard holders, in the order the answering node
// would read them (itself first when it is one). No holders: the answering
// node is not clustered and holds it. Key is the block's name in the
// bucket's namespace (block.Key.ObjectName: 16 hex digits, ".N" for part
// N), which a co-located reader passes to the native protocol's DESCRIBE
// to read a whole replica in place (docs/weights.md).
type Block struct {
	Offset     int64    `xml:"Offset"`
	Length     int64    `xml:"Length"`
	Key        string   `xml:"Key,omitempty"`
	DataShards int      `xml:"DataShards"`
	Holders    []Holder `xml:"Holder"`
}

// Holder is a member holding shard Shard of a block; State is the
// member's state as the cluster agrees on it (alive, suspect, dead, left,
// draining). InMemory is set only on the answering node's own holder
// entry, when that shard is in its DRAM tier at the time of the answer (a
// read of it touches no lower tier); a node does not know other members'
// tiers.
type Holder struct {
	Node     string `xml:"Node"`
	Shard    int    `xml:"Shard"`
	State    string `xml:"State"`
	InMemory bool   `xml:"InMemory,omitempty"`
}
