package store_test

import (
	"testing"

	"github.com/wagent/wagent/store"
	"github.com/wagent/wagent/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Log { return store.NewMemory() })
}
