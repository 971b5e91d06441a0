package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// rebalanceReply is "ctxctl cluster rebalance status --json": the leader's
// rebalancing status, and which node answered.
type rebalanceReply struct {
	NodeID    string                  `json:"node_id"`
	Rebalance cluster.RebalanceStatus `json:"rebalance"`
}

// rebalanceStatus reads the rebalancing status from the leader: the node
// c talks to, or the leader that node names (dialled with dial).
func rebalanceStatus(ctx context.Context, c *clusterapi.Client, dial func(addr string) *clusterapi.Client) (rebalanceReply, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return rebalanceReply{}, err
	}
	if st.State != "leader" {
		if st.Leader == nil || st.Leader.HTTPAddr == "" {
			return rebalanceReply{}, fmt.Errorf("rebalance status: node %s knows no leader (rebalancing runs on the leader)", st.NodeID)
		}
		if st, err = dial(st.Leader.HTTPAddr).Status(ctx); err != nil {
			return rebalanceReply{}, fmt.Errorf("rebalance status from the leader: %w", err)
		}
	}
	var extra struct {
		Rebalance *cluster.RebalanceStatus `json:"rebalance"`
	}
	if err := json.Unmarshal(st.Extra, &extra); err != nil || extra.Rebalance == nil {
		return rebalanceReply{}, fmt.Errorf("rebalance status: node %s reports no rebalancing (an older ctxd?)", st.NodeID)
	}
	return rebalanceReply{NodeID: st.NodeID, Rebalance: *extra.Rebalance}, nil
}

// printRebalance prints the status one field a line.
func printRebalance(out io.Writer, r rebalanceReply) error {
	s := r.Rebalance
	role := "leader"
	if !s.Active {
		role = "not the leader: no rebalancing figures"
	}
	fmt.Fprintf(out, "rebalance on node %s (%s)\n", r.NodeID, role)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  running\t%s\n", yesNo(s.Running))
	fmt.Fprintf(tw, "  pending\t%d\tshards on members placement no longer picks\n", s.Pending)
	fmt.Fprintf(tw, "  deferred\t%d\tblocks left to repair first\n", s.DeferredBlocks)
	fmt.Fprintf(tw, "  failed\t%d\tmoves to retry\n", s.Failed)
	fmt.Fprintf(tw, "  moved\t%d\tshards, %s\n", s.MovedShards, formatBytes(int64(s.MovedBytes)))
	fmt.Fprintf(tw, "  rate\t%s/s\t%.1f shards/s (limit %s/s)\n", formatBytes(int64(s.RateBytesPerSec)), s.RateShardsPerSec, formatBytes(s.LimitBytesPerSec))
	eta := "-"
	if s.Running && s.ETASeconds > 0 {
		eta = (time.Duration(s.ETASeconds * float64(time.Second))).Round(time.Second).String()
	}
	fmt.Fprintf(tw, "  eta\t%s\n", eta)
	last := "never"
	if !s.LastScan.IsZero() {
		last = fmt.Sprintf("%s\t%d blocks", s.LastScan.UTC().Format(time.RFC3339), s.ScannedBlocks)
	}
	fmt.Fprintf(tw, "  last scan\t%s\n", last)
	return tw.Flush()
}
