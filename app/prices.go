package app

import (
	"regexp"
	"strings"
)

// PricesTaken is when the built-in price table was taken from the
// vendors' published prices. A config file's prices: entries override it.
const PricesTaken = "2026-12"

// builtinPrices are the vendors' published list prices, in US dollars per
// million tokens (input, output), for the models people use most, so a
// cost shows without configuration. Cached-input and batch discounts are
// not counted: the estimate is the list price of what was sent.
var builtinPrices = map[string]Price{
	// OpenAI
	"gpt-4o":       {2.50, 10.00},
	"gpt-4o-mini":  {0.15, 0.60},
	"gpt-4.1":      {2.00, 8.00},
	"gpt-4.1-mini": {0.40, 1.60},
	"gpt-4.1-nano": {0.10, 0.40},
	"gpt-5":        {1.25, 10.00},
	"gpt-5-mini":   {0.25, 2.00},
	"gpt-5-nano":   {0.05, 0.40},
	"gpt-5.1":      {1.25, 10.00},
	"o3":           {2.00, 8.00},
	"o3-mini":      {1.10, 4.40},
	"o4-mini":      {1.10, 4.40},
	// Anthropic
	"claude-opus-4-6":   {5.00, 25.00},
	"claude-opus-4-5":   {5.00, 25.00},
	"claude-opus-4-1":   {15.00, 75.00},
	"claude-opus-4-0":   {15.00, 75.00},
	"claude-opus-4":     {15.00, 75.00},
	"claude-sonnet-4-6": {3.00, 15.00},
	"claude-sonnet-4-5": {3.00, 15.00},
	"claude-sonnet-4-0": {3.00, 15.00},
	"claude-sonnet-4":   {3.00, 15.00},
	"claude-haiku-4-5":  {1.00, 5.00},
	"claude-3-7-sonnet": {3.00, 15.00},
	"claude-3-5-sonnet": {3.00, 15.00},
	"claude-3-5-haiku":  {0.80, 4.00},
}

// dated is the suffix a vendor puts on a pinned model version:
// gpt-4o-2024-08-06, claude-sonnet-4-5-20250929, claude-3-5-haiku-latest.
var dated = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$`)

// BuiltinPrice is the built-in price of model, matched with its date
// suffix taken off (gpt-4o-2024-08-06 is priced as gpt-4o).
func BuiltinPrice(model string) (Price, bool) {
	m := strings.ToLower(strings.TrimSpace(model))
	if p, ok := builtinPrices[m]; ok {
		return p, true
	}
	p, ok := builtinPrices[dated.ReplaceAllString(m, "")]
	return p, ok
}
