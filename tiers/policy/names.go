package policy

import (
	"errors"
	"fmt"
	"sort"
)

// ErrUnknownPolicy reports a policy name that Lookup does not know.
var ErrUnknownPolicy = errors.New("policy: unknown policy")

func segmentedWith(mod func(*SegmentedConfig)) Factory {
	c := DefaultSegmentedConfig()
	mod(&c)
	return c.Factory()
}

func windowWith(mod func(*WindowConfig)) Factory {
	c := DefaultWindowConfig()
	mod(&c)
	return c.Factory()
}

// named lists the policies by name: the production ones and the ablations
// of Window and Segmented that docs/policy.md measures. "duel", ctxd's
// default, is Duel inside Hinted: blocks put without agent hints see
// exactly Duel ("duel-nohints" is Duel alone); "window" likewise.
var named = map[string]Factory{
	"lru":                  NewLRU,
	"s3fifo":               NewS3FIFO,
	"window":               DefaultHintConfig().Factory(NewWindow), // honours agent hints when present
	"window-nohints":       NewWindow,
	"duel":                 DefaultHintConfig().Factory(NewDuel), // Duel of Window and LRU, honouring agent hints
	"duel-nohints":         NewDuel,
	"window-noghost":       windowWith(func(c *WindowConfig) { c.Ghost = false }),
	"window-nochain":       windowWith(func(c *WindowConfig) { c.ChainOrder = false }),
	"window-notail":        windowWith(func(c *WindowConfig) { c.TailDemote = false }),
	"window-static":        windowWith(func(c *WindowConfig) { c.Adaptive = false }),
	"segmented":            NewSegmented,
	"segmented-noghost":    segmentedWith(func(c *SegmentedConfig) { c.Ghost = false }),
	"segmented-nochain":    segmentedWith(func(c *SegmentedConfig) { c.ChainOrder = false }),
	"segmented-notail":     segmentedWith(func(c *SegmentedConfig) { c.TailDemote = false }),
	"segmented-static":     segmentedWith(func(c *SegmentedConfig) { c.Adaptive = false }),
	"segmented-static-0.8": segmentedWith(func(c *SegmentedConfig) { c.Adaptive = false; c.ProtectedFraction = 0.8 }),
}

// Lookup returns the factory of the policy called name.
func Lookup(name string) (Factory, error) {
	f, ok := named[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknownPolicy, name, Names())
	}
	return f, nil
}

// Names lists the known policy names, sorted.
func Names() []string {
	out := make([]string, 0, len(named))
	for n := range named {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
