package resp

import "sync"

// bufPool recycles argument arenas in power-of-two size classes, so a stream
// of 2 MiB SETs reuses the same few buffers.
type bufPool struct {
	classes [32]sync.Pool
}

const minBufClass = 10 // 1 KiB

func bufClass(n int) int {
	c := minBufClass
	for (1 << c) < n {
		c++
	}
	return c
}

func (p *bufPool) get(n int) *[]byte {
	c := bufClass(n)
	if v, ok := p.classes[c].Get().(*[]byte); ok {
		*v = (*v)[:cap(*v)]
		return v
	}
	b := make([]byte, 1<<c)
	return &b
}

func (p *bufPool) put(b *[]byte) {
	if b == nil {
		return
	}
	c := bufClass(cap(*b))
	if 1<<c != cap(*b) || c >= len(p.classes) {
		return
	}
	p.classes[c].Put(b)
}
