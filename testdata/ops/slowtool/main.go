// Command slowtool is a Go guest for the crash tests: it owns two tools
// that take as long as the test wants, so a test can kill wagent while one
// of them runs.
//
//	slow_write  not idempotent: after a crash its outcome is unknown
//	slow_read   idempotent: after a crash it may run again
//
// Each holds its call while the file /gate/hold exists (the test grants a
// read-only mount at /gate and removes the file to let calls finish), then
// answers "done CALL_ID" and notes that it finished.
package main

import (
	"os"

	"github.com/wagent/wagent/guests/pdk"
	"github.com/wagent/wagent/hostabi"
)

var tools = []hostabi.ToolSpec{
	{Name: "slow_write", Description: "Write something; takes a while.", Parameters: []byte(`{"type":"object"}`)},
	{Name: "slow_read", Description: "Read something; takes a while.", Parameters: []byte(`{"type":"object"}`)},
}

func init() {
	pdk.Register(pdk.Op{
		Manifest: hostabi.Manifest{
			Name:         "slowtool",
			Version:      "1.0.0",
			Tools:        []string{"slow_write", "slow_read"},
			Idempotent:   []string{"slow_read"},
			Capabilities: hostabi.Capabilities{Mounts: []hostabi.GuestMount{{Path: "/gate"}}},
		},
		Contribute: func(c *pdk.Call) error {
			for i := range tools {
				c.Emit(hostabi.Effect{Kind: hostabi.KindTool, Tool: &tools[i]})
			}
			return nil
		},
		Tool: func(c *pdk.Call) error {
			id := c.View.Tool.Run
			if id == "" {
				return nil
			}
			for {
				if _, err := os.Stat("/gate/hold"); err != nil {
					break
				}
			}
			c.SetNote("finished/"+id, "yes")
			c.Result(id, "done "+id, false)
			return nil
		},
	})
}

func main() { pdk.Main() }
