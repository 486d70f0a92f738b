package ops

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/wagent/wagent/guests/pdk"
)

// Undo. Every change write_file and edit_file make is recorded as the
// files op's notes, in the same append as the call's result, so the log
// holds what undo needs and a replay sees it:
//
//	undo/turns   the turns whose changes can still be undone, "3 5 8"
//	undo/T       how many changes turn T made, "2"
//	undo/T/K     change K (from 1) of turn T, JSON (change below)
//	undone/T     the turn whose /undo took turn T back, "9"
//	undo/partial the files an /undo that failed for others put back,
//	             JSON ["/work/a.txt"]; its turns stay undoable, and the
//	             next /undo passes over these when they are still as it
//	             left them
//
// The host lets an op read a note by key and offers no listing, hence the
// index notes. The content before a change is kept up to maxUndoBytes
// (base64, so a note stays well inside one log event, 1 MiB); a change to
// a larger file is recorded as one undo cannot take back.
//
// /undo [--turn N] restores every file changed in turns ≥ N (default: the
// latest turn with changes not undone yet) as it was before turn N, and
// removes the files those turns created. It refuses, restoring nothing,
// when a file's content is no longer what the session last wrote (someone
// changed it since) or its earlier content was not kept, or when a file
// or a folder on its way is now a symbolic link (a write would follow it
// to another file). When a file still cannot be put back (a write fails)
// no turn is marked undone: the reply says which failed, and /undo again
// retries, passing over the files already restored.

// writeBack and removeBack make undo's changes (tests make them fail).
var (
	writeBack  = writeNoFollow
	removeBack = os.Remove
)

// writeNoFollow is os.WriteFile that fails on a link put in the file's
// place since undo looked (os.Remove removes a link itself, never its
// target).
func writeNoFollow(p string, b []byte, mode fs.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|noFollow, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// maxUndoBytes is the largest file whose content before a change is kept.
const maxUndoBytes = 256 << 10

// change is one recorded change (the value of note undo/T/K).
type change struct {
	Path    string `json:"path"`             // the guest path
	Existed bool   `json:"existed"`          // the file was there before
	Before  string `json:"before,omitempty"` // its content, base64
	Kept    bool   `json:"kept"`             // Before holds it (under the cap)
	Mode    uint32 `json:"mode,omitempty"`   // its permissions
	After   string `json:"after"`            // sha256 of what was written, hex
	Size    int    `json:"size,omitempty"`   // the length of what was written
}

// changes collects what one call changed (a nil *changes records nothing).
type changes struct{ list []change }

func (ch *changes) record(full string, existed bool, before []byte, kept bool, mode fs.FileMode, after string) {
	if ch == nil {
		return
	}
	c := change{Path: full, Existed: existed, Kept: kept, Mode: uint32(mode), After: hashOf([]byte(after)), Size: len(after)}
	if existed && kept {
		c.Before = base64.StdEncoding.EncodeToString(before)
	}
	ch.list = append(ch.list, c)
}

func hashOf(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// emit writes the call's changes as notes of the open turn.
func (ch *changes) emit(c *pdk.Call) {
	if len(ch.list) == 0 || c.View.Turn == 0 {
		return
	}
	turn := strconv.Itoa(c.View.Turn)
	n := 0
	if v, ok := c.Note("undo/" + turn); ok {
		n, _ = strconv.Atoi(v)
	}
	for _, x := range ch.list {
		n++
		b, _ := json.Marshal(x)
		c.SetNote("undo/"+turn+"/"+strconv.Itoa(n), string(b))
	}
	c.SetNote("undo/"+turn, strconv.Itoa(n))
	turns := undoTurns(c)
	if !slices.Contains(turns, c.View.Turn) {
		c.SetNote("undo/turns", joinTurns(append(turns, c.View.Turn)))
	}
}

func undoTurns(c *pdk.Call) []int {
	v, _ := c.Note("undo/turns")
	var out []int
	for _, f := range strings.Fields(v) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func joinTurns(turns []int) string {
	s := make([]string, len(turns))
	for i, t := range turns {
		s[i] = strconv.Itoa(t)
	}
	return strings.Join(s, " ")
}

// parseUndoArgs reads "" or "--turn N" (also "--turn=N" and "N").
func parseUndoArgs(args string) (int, error) {
	f := strings.Fields(strings.ReplaceAll(args, "=", " "))
	switch {
	case len(f) == 0:
		return 0, nil
	case len(f) == 2 && (f[0] == "--turn" || f[0] == "-turn"):
		f = f[1:]
	case len(f) != 1:
		return 0, errors.New("usage: /undo [--turn N]")
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 {
		return 0, fmt.Errorf("/undo: turn %q is not a turn number (usage: /undo [--turn N])", f[0])
	}
	return n, nil
}

// undo answers /undo.
func undo(c *pdk.Call) error {
	cfg, err := filesConf(c)
	if err != nil {
		return err
	}
	c.Reply(cfg.undo(c))
	return nil
}

// target is one file undo puts back: its state before the first undone
// change, and the hash the session last wrote.
type target struct {
	first change
	turn  int // of first
	last  string
	// gap is the turn of a later change that did not start from what the
	// session last wrote (someone changed or removed the file between the
	// session's writes); 0 when none did.
	gap int
}

// startsFrom reports whether change x was made on the content whose hash
// is last (what the session wrote before it), as far as its record tells:
// a file that was not there had been removed, and a kept content must
// hash to last. A content over the cap was not kept and cannot be told.
func startsFrom(x change, last string) bool {
	if !x.Existed {
		return false
	}
	if !x.Kept {
		return true
	}
	b, err := base64.StdEncoding.DecodeString(x.Before)
	return err == nil && hashOf(b) == last
}

func (cfg *filesConfig) undo(c *pdk.Call) string {
	from, err := parseUndoArgs(c.View.Command.Args)
	if err != nil {
		return err.Error()
	}
	turns := undoTurns(c)
	if from == 0 {
		if len(turns) == 0 {
			return "nothing to undo: no turn of this session changed files with write_file or edit_file, or their changes were undone already"
		}
		from = turns[len(turns)-1]
	} else if by, ok := c.Note("undone/" + strconv.Itoa(from)); ok {
		return fmt.Sprintf("turn %d's file changes were undone already (by /undo in turn %s)", from, by)
	}
	var undoing []int
	for _, t := range turns {
		if t >= from {
			undoing = append(undoing, t)
		}
	}
	if len(undoing) == 0 {
		return fmt.Sprintf("nothing to undo: no turn from %d on changed files with write_file or edit_file", from)
	}
	// Gather each file's state before the first change and the session's
	// last write, in order.
	var order []string
	files := map[string]*target{}
	for _, t := range undoing {
		ts := strconv.Itoa(t)
		v, _ := c.Note("undo/" + ts)
		n, _ := strconv.Atoi(v)
		for k := 1; k <= n; k++ {
			raw, ok := c.Note("undo/" + ts + "/" + strconv.Itoa(k))
			var x change
			if !ok || json.Unmarshal([]byte(raw), &x) != nil {
				return fmt.Sprintf("cannot undo: the record of change %d of turn %d is missing or damaged; nothing was restored", k, t)
			}
			if tg, ok := files[x.Path]; ok {
				if tg.gap == 0 && !startsFrom(x, tg.last) {
					tg.gap = t
				}
				tg.last = x.After
				continue
			}
			files[x.Path] = &target{first: x, turn: t, last: x.After}
			order = append(order, x.Path)
		}
	}
	// Refuse before touching anything.
	partial := partlyRestored(c)
	done := map[string]bool{}
	for _, p := range order {
		tg, name := files[p], cfg.rel(p)
		if tg.first.Existed && !tg.first.Kept {
			return fmt.Sprintf("cannot undo: %s was over %d KiB before turn %d, so its content was not kept; nothing was restored", name, maxUndoBytes>>10, tg.turn)
		}
		if tg.gap != 0 {
			return fmt.Sprintf("cannot undo: %s was changed by someone else between this session's writes (before its change in turn %d), and restoring it would lose that; nothing was restored", name, tg.gap)
		}
		if link := cfg.linkOn(p); link != "" {
			return fmt.Sprintf("cannot undo: %s is now a symbolic link, and writing through it would change another file; nothing was restored", link)
		}
		if partial[p] && tg.isBefore(p) {
			done[p] = true
			continue
		}
		st, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Sprintf("cannot undo: %s was removed since this session last wrote it; nothing was restored", name)
		case errors.Is(err, fs.ErrPermission):
			return fmt.Sprintf("cannot undo: %s cannot be reached (a link out of the project put in its place?); nothing was restored", name)
		case err != nil:
			return fmt.Sprintf("cannot undo: %s: %v; nothing was restored", name, unwrapPath(err))
		case st.IsDir() || notRegular(name, st) != nil:
			return fmt.Sprintf("cannot undo: %s is no longer a regular file; nothing was restored", name)
		}
		b, err := readInto(p, nil, 64<<20)
		if err != nil {
			return fmt.Sprintf("cannot undo: %s cannot be read (%v); nothing was restored", name, err)
		}
		if hashOf(b) != tg.last {
			return fmt.Sprintf("cannot undo: %s changed since this session last wrote it (someone else edited it); nothing was restored", name)
		}
	}
	var restored, removed, failed []string
	var put []string
	for _, p := range order {
		tg, name := files[p], cfg.rel(p)
		if done[p] {
			put = append(put, p)
			if tg.first.Existed {
				restored = append(restored, name)
			} else {
				removed = append(removed, name)
			}
			continue
		}
		if !tg.first.Existed {
			if err := removeBack(p); err != nil {
				failed = append(failed, fmt.Sprintf("%s (%v)", name, unwrapPath(err)))
				continue
			}
			removed = append(removed, name)
			put = append(put, p)
			continue
		}
		before, err := base64.StdEncoding.DecodeString(tg.first.Before)
		if err == nil {
			err = writeBack(p, before, fs.FileMode(tg.first.Mode).Perm())
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", name, unwrapPath(err)))
			continue
		}
		restored = append(restored, name)
		put = append(put, p)
	}
	what := "turn " + strconv.Itoa(undoing[0])
	if len(undoing) > 1 {
		what = "turns " + joinTurns(undoing)
	}
	if len(failed) > 0 {
		// No turn is marked undone: /undo again puts back what failed,
		// passing over what was put back now.
		b, _ := json.Marshal(put)
		c.SetNote("undo/partial", string(b))
		var out strings.Builder
		fmt.Fprintf(&out, "undo of %s FAILED for %s", what, strings.Join(failed, ", "))
		if len(restored) > 0 {
			fmt.Fprintf(&out, "; restored %s", strings.Join(restored, ", "))
		}
		if len(removed) > 0 {
			fmt.Fprintf(&out, "; removed %s (created then)", strings.Join(removed, ", "))
		}
		retry := "/undo"
		if c.View.Command.Args != "" {
			retry = "/undo --turn " + strconv.Itoa(from)
		}
		stay := " stays"
		if len(undoing) > 1 {
			stay = " stay"
		}
		fmt.Fprintf(&out, "; %s%s undoable: fix what failed and run %s again", what, stay, retry)
		return out.String()
	}
	if len(partial) > 0 {
		c.SetNote("undo/partial", "[]")
	}
	now := strconv.Itoa(c.View.Turn)
	var keep []int
	for _, t := range turns {
		if t >= from {
			c.SetNote("undone/"+strconv.Itoa(t), now)
		} else {
			keep = append(keep, t)
		}
	}
	c.SetNote("undo/turns", joinTurns(keep))
	var b strings.Builder
	fmt.Fprintf(&b, "undid the file changes of %s", what)
	if len(restored) > 0 {
		fmt.Fprintf(&b, "; restored %s", strings.Join(restored, ", "))
	}
	if len(removed) > 0 {
		fmt.Fprintf(&b, "; removed %s (created then)", strings.Join(removed, ", "))
	}
	return b.String()
}

// partlyRestored are the files an /undo that failed for others put back
// (note undo/partial).
func partlyRestored(c *pdk.Call) map[string]bool {
	v, _ := c.Note("undo/partial")
	var list []string
	json.Unmarshal([]byte(v), &list)
	out := map[string]bool{}
	for _, p := range list {
		out[p] = true
	}
	return out
}

// isBefore reports whether p is as it was before the target's first
// change: absent for a file the session created, else a regular file
// with the content kept.
func (tg *target) isBefore(p string) bool {
	st, err := os.Lstat(p)
	if !tg.first.Existed {
		return errors.Is(err, fs.ErrNotExist)
	}
	if err != nil || !st.Mode().IsRegular() {
		return false
	}
	want, err := base64.StdEncoding.DecodeString(tg.first.Before)
	if err != nil || int64(len(want)) != st.Size() {
		return false
	}
	b, err := readInto(p, nil, maxUndoBytes+1)
	return err == nil && hashOf(b) == hashOf(want)
}

// linkOn names the first component of guest path p below the project
// (the file itself included) that is a symbolic link, or "" when none is.
func (cfg *filesConfig) linkOn(p string) string {
	at := cfg.Dir
	for _, c := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(p, cfg.Dir), "/"), "/") {
		at += "/" + c
		st, err := os.Lstat(at)
		if err != nil {
			return ""
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return cfg.rel(at)
		}
	}
	return ""
}
