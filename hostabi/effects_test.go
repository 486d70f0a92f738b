package hostabi

import (
	"math"
	"strings"
	"testing"
)

// Numbers and sizes from guests are range-checked: no delay can overflow
// the engine's retry time, no list repeats itself, no short string is long.
func TestEffectBounds(t *testing.T) {
	long := strings.Repeat("x", MaxNameLen+1)
	for _, tc := range []struct {
		name string
		hook Hook
		e    Effect
		want string // "" for accepted
	}{
		{"retry now", HookRequestError, Effect{Kind: KindRetry}, ""},
		{"retry in a day", HookRequestError, Effect{Kind: KindRetry, DelayMS: MaxRetryDelayMS}, ""},
		{"retry in a day and a ms", HookRequestError, Effect{Kind: KindRetry, DelayMS: MaxRetryDelayMS + 1}, "retry delay 86400001 ms is outside 0 to 86400000 ms"},
		{"retry at the end of time", HookRequestError, Effect{Kind: KindRetry, DelayMS: math.MaxInt64}, "retry delay 9223372036854775807 ms is outside"},
		{"retry in the past", HookRequestError, Effect{Kind: KindRetry, DelayMS: -1}, "retry delay -1 ms is outside"},
		{"one call twice", HookTool, Effect{Kind: KindApprovalRequest, CallIDs: []string{"c1", "c2", "c1"}}, `approval_request names call "c1" twice`},
		{"a long level", HookTool, Effect{Kind: KindLog, Level: long, Text: "x"}, "over 256 bytes"},
		{"a long code", HookTool, Effect{Kind: KindResult, CallID: "c1", Code: long}, "over 256 bytes"},
		{"a long tool name", HookContribute, Effect{Kind: KindTool, Tool: &ToolSpec{Name: long}}, "name over 256 bytes"},
		{"a long description", HookContribute, Effect{Kind: KindTool, Tool: &ToolSpec{Name: "t", Description: strings.Repeat("x", MaxTextBytes+1)}}, "description or parameters over"},
		{"a long rewrite", HookPrompt, Effect{Kind: KindRewrite, Messages: []InputMessage{{ID: "m", Content: strings.Repeat("x", MaxTextBytes+1)}}}, "rewrite: a message over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.e.Check(tc.hook)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}
