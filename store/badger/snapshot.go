package badger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	bdb "github.com/dgraph-io/badger/v4"

	"github.com/wagent/wagent/store"
)

// Snapshots live under their own key beside the session's log:
//
//	's' len id  -> 8-byte big-endian seq, then the snapshot's bytes
const snapTag = 's'

func snapKey(session string) []byte {
	k := make([]byte, 0, 2+len(session))
	k = append(k, snapTag, byte(len(session)))
	return append(k, session...)
}

var _ store.Snapshots = (*Store)(nil)

// PutSnapshot implements store.Snapshots.
func (b *Store) PutSnapshot(ctx context.Context, session string, seq uint64, data []byte) error {
	op := "snapshot " + session
	if err := store.ValidSessionID(session); err != nil {
		return err
	}
	if len(data) > store.MaxSnapshotBytes {
		return fmt.Errorf("%w: %s is %d bytes, the limit is %d", store.ErrInvalid, op, len(data), store.MaxSnapshotBytes)
	}
	if err := b.begin(op); err != nil {
		return err
	}
	defer b.mu.RUnlock()
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(data)), seq)
	v = append(v, data...)
	return b.retry(op, func(txn *bdb.Txn) error {
		if _, err := getHead(txn, op, session); err != nil {
			return err
		}
		return txn.Set(snapKey(session), v)
	})
}

// Snapshot implements store.Snapshots.
func (b *Store) Snapshot(ctx context.Context, session string) (uint64, []byte, error) {
	op := "read the snapshot of " + session
	if err := store.ValidSessionID(session); err != nil {
		return 0, nil, err
	}
	if err := b.begin(op); err != nil {
		return 0, nil, err
	}
	defer b.mu.RUnlock()
	var seq uint64
	var data []byte
	err := b.db.View(func(txn *bdb.Txn) error {
		if _, err := getHead(txn, op, session); err != nil {
			return err
		}
		item, err := txn.Get(snapKey(session))
		if errors.Is(err, bdb.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if len(v) < 8 {
			return nil // not a snapshot: ignored, as any bad one is
		}
		seq, data = binary.BigEndian.Uint64(v[:8]), v[8:]
		return nil
	})
	return seq, data, err
}
