package ops

import (
	"sort"
	"strings"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

// UnknownTool answers every call no op owns with an error result that
// names the tool and lists the ones offered, so the model can correct
// itself. The pipeline adds it at the end when a file names no fallback.
// It takes no config.
func UnknownTool() Op {
	return Op{
		Manifest: hostabi.Manifest{Name: "unknown-tool", Version: "1.0.0", ConfigSchema: strictSchema("")},
		Tool:     unknownTool,
	}
}

func unknownTool(c *pdk.Call) error {
	t := c.View.Tool
	if t.Run != "" {
		return nil
	}
	offered := append([]string(nil), t.Offered...)
	sort.Strings(offered)
	list := "none"
	if len(offered) > 0 {
		list = strings.Join(offered, ", ")
	}
	for _, call := range t.Calls {
		if call.Owner != "" {
			continue
		}
		c.ErrorResult(call.ID, "There is no tool named "+quoteName(call.Name)+". The tools you can call are: "+list+".", hostabi.CodeUnknownTool)
	}
	return nil
}

func quoteName(s string) string { return "\"" + s + "\"" }
