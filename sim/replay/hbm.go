package replay

// hbm is a worker's simulated accelerator-memory prefix cache: an LRU of
// block hashes bounded by a block count. Lookups have prefix semantics: a
// request's blocks hit up to the first one absent.
type hbm struct {
	capacity int
	nodes    map[uint64]*hbmNode
	head     hbmNode // sentinel: head.next is the most recent, head.prev the least
}

type hbmNode struct {
	hash       uint64
	prev, next *hbmNode
}

func newHBM(capacity int) *hbm {
	c := &hbm{capacity: capacity, nodes: make(map[uint64]*hbmNode)}
	c.head.next, c.head.prev = &c.head, &c.head
	return c
}

// prefix returns how many leading hashes are resident. It does not change
// recency: the blocks are touched when the request completes (insert).
func (c *hbm) prefix(hashes []uint64) int {
	for i, h := range hashes {
		if _, ok := c.nodes[h]; !ok {
			return i
		}
	}
	return len(hashes)
}

func (c *hbm) unlink(n *hbmNode) {
	n.prev.next, n.next.prev = n.next, n.prev
}

func (c *hbm) pushFront(n *hbmNode) {
	n.prev, n.next = &c.head, c.head.next
	c.head.next.prev = n
	c.head.next = n
}

// insert makes every hash resident and most recent, and returns which
// positions were not resident before and which hashes were evicted to make
// room (possibly some of hashes themselves when they outnumber the capacity).
// The blocks are touched last to first, as vLLM frees them, so that the
// prefix is the most recent and a request's tail is evicted before its head.
func (c *hbm) insert(hashes []uint64) (added []int, evicted []uint64) {
	if c.capacity <= 0 {
		return nil, nil
	}
	for i := len(hashes) - 1; i >= 0; i-- {
		h := hashes[i]
		if n, ok := c.nodes[h]; ok {
			c.unlink(n)
			c.pushFront(n)
			continue
		}
		n := &hbmNode{hash: h}
		c.nodes[h] = n
		c.pushFront(n)
		added = append(added, i)
		for len(c.nodes) > c.capacity {
			lru := c.head.prev
			c.unlink(lru)
			delete(c.nodes, lru.hash)
			evicted = append(evicted, lru.hash)
		}
	}
	// added was collected last to first; report it in prefix order.
	for l, r := 0, len(added)-1; l < r; l, r = l+1, r-1 {
		added[l], added[r] = added[r], added[l]
	}
	return added, evicted
}

func (c *hbm) len() int { return len(c.nodes) }
