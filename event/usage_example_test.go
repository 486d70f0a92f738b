package event_test

import (
	"fmt"

	"github.com/wagent/wagent/event"
)

// A session's usage is its answers' and summary requests' added up.
func ExampleUsage_Add() {
	var total event.Usage
	for _, u := range []event.Usage{{InputTokens: 1200, OutputTokens: 40}, {InputTokens: 1300, OutputTokens: 25}} {
		total = total.Add(u)
	}
	fmt.Println(total.InputTokens, total.OutputTokens, total.Total())
	// Output: 2500 65 2565
}
