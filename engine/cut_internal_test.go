package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/wagent/wagent/event"
	"github.com/wagent/wagent/hostabi"
)

// The cut cache finds, as messages are added and compactions stub the
// oldest, the same latest cut point as scanning the whole conversation
// with CutPoints, at every bound.
func TestCutCacheAgreesWithCutPoints(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := event.NewState("s")
		var c cutCache
		open := []string{}
		for step := 0; step < 60; step++ {
			switch k := rng.IntN(10); {
			case k < 3 && len(open) == 0:
				s.Messages = append(s.Messages, hostabi.Message{Role: "user", Content: "u"})
			case k < 6 && len(open) == 0:
				m := hostabi.Message{Role: "assistant"}
				for i := rng.IntN(3); i > 0; i-- {
					id := fmt.Sprintf("c%d-%d", step, i)
					m.ToolCalls = append(m.ToolCalls, hostabi.ToolCall{ID: id})
					open = append(open, id)
				}
				s.Messages = append(s.Messages, m)
			case len(open) > 0:
				j := rng.IntN(len(open))
				s.Messages = append(s.Messages, hostabi.Message{Role: "tool", CallID: open[j]})
				open = append(open[:j], open[j+1:]...)
			case k == 9:
				// A compaction through a cut point stubs what it stands for.
				if pts := cutPointsOf(s); len(pts) > 0 {
					through := pts[rng.IntN(len(pts))]
					drop := through - s.Stubbed
					s.Messages = append([]hostabi.Message(nil), s.Messages[drop:]...)
					s.Stubbed = through
				}
			}
			pts := cutPointsOf(s)
			for at := -1; at <= s.MessageCount()+1; at++ {
				want := 0
				for _, p := range pts {
					if p <= at {
						want = p
					}
				}
				if got := c.latest(s, at); got != want {
					t.Fatalf("seed %d step %d: latest cut at most %d is %d, CutPoints says %d (points %v, stubbed %d)", seed, step, at, got, want, pts, s.Stubbed)
				}
			}
		}
	}
}

// cutPointsOf lists the cut points after the latest summary, as indices
// of the whole conversation.
func cutPointsOf(s *event.State) []int {
	out := event.CutPoints(s.Messages)
	for i := range out {
		out[i] += s.Stubbed
	}
	return out
}
