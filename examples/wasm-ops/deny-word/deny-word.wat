;; deny-word: a wagent policy op written by hand in WebAssembly text, with
;; no guest kit and no language runtime. At the tool hook it denies every
;; pending call whose arguments contain a configured word, so the call never
;; runs and the model reads why. Calls already decided, or running, are
;; left alone; anything else skips (the next op decides).
;;
;; Config: {"word": "rm"}. The word is matched as bytes against the
;; arguments' JSON text, so {"command": "rm -rf /"} contains "rm".
;;
;; Build (wabt from Debian, then the manifest):
;;   wat2wasm deny-word.wat -o deny-word.wasm
;;   go run ./guests/cmd/wagent-build -manifest deny-word.manifest.json \
;;     -o deny-word.wasm deny-word.wasm
(module
  (import "wagent" "view" (func $view (param i32 i32) (result i32)))
  (import "wagent" "effects" (func $effects (param i32 i32) (result i32)))
  (import "wagent" "log" (func $log (param i32 i32 i32) (result i32)))

  ;; 0..1023 constants, 1024..131071 the view, 131072.. the effects.
  (memory (export "memory") 4)

  (data (i32.const 16) "\"word\":\"")            ;; 8 bytes
  (data (i32.const 32) "\"calls\":[")            ;; 9 bytes
  (data (i32.const 48) "\"id\":\"")              ;; 6 bytes
  (data (i32.const 64) "\"arguments\":")         ;; 12 bytes
  (data (i32.const 80) "\"decision\":")          ;; 11 bytes
  (data (i32.const 96) "\"started\":true")       ;; 14 bytes
  (data (i32.const 128) "{\"kind\":\"decision\",\"call_id\":\"") ;; 30 bytes
  (data (i32.const 176) "\",\"text\":\"denied by deny-word: the arguments contain the word ") ;; 62 bytes
  (data (i32.const 256) "deny-word: the view does not fit its buffer") ;; 43 bytes

  (global $buf i32 (i32.const 1024))
  (global $cap i32 (i32.const 130048))
  (global $out i32 (i32.const 131072))

  (func (export "wagent_abi_v1"))

  ;; find returns the offset of needle[0..nlen) in [from, to), or -1.
  (func $find (param $from i32) (param $to i32) (param $needle i32) (param $nlen i32) (result i32)
    (local $i i32) (local $j i32)
    (local.set $i (local.get $from))
    (block $none
      (loop $scan
        (br_if $none (i32.gt_s (i32.add (local.get $i) (local.get $nlen)) (local.get $to)))
        (local.set $j (i32.const 0))
        (block $miss
          (loop $cmp
            (br_if $miss (i32.ne
              (i32.load8_u (i32.add (local.get $i) (local.get $j)))
              (i32.load8_u (i32.add (local.get $needle) (local.get $j)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br_if $cmp (i32.lt_u (local.get $j) (local.get $nlen))))
          (return (local.get $i)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (i32.const -1))

  ;; skipString returns the offset after the string whose opening quote is
  ;; at $p, honouring backslash escapes.
  (func $skipString (param $p i32) (param $to i32) (result i32)
    (local $c i32)
    (local.set $p (i32.add (local.get $p) (i32.const 1)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $p) (local.get $to)))
        (local.set $c (i32.load8_u (local.get $p)))
        (if (i32.eq (local.get $c) (i32.const 92)) ;; backslash
          (then (local.set $p (i32.add (local.get $p) (i32.const 2))) (br $next)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br_if $done (i32.eq (local.get $c) (i32.const 34))) ;; closing quote
        (br $next)))
    (local.get $p))

  ;; skipValue returns the offset after the JSON value starting at $p.
  (func $skipValue (param $p i32) (param $to i32) (result i32)
    (local $c i32) (local $depth i32)
    (local.set $c (i32.load8_u (local.get $p)))
    (if (i32.eq (local.get $c) (i32.const 34))
      (then (return (call $skipString (local.get $p) (local.get $to)))))
    (if (i32.and
          (i32.ne (local.get $c) (i32.const 123))  ;; {
          (i32.ne (local.get $c) (i32.const 91)))  ;; [
      (then
        ;; A scalar: up to the next , } ] or whitespace.
        (block $end
          (loop $scalar
            (br_if $end (i32.ge_u (local.get $p) (local.get $to)))
            (local.set $c (i32.load8_u (local.get $p)))
            (br_if $end (i32.or (i32.or (i32.eq (local.get $c) (i32.const 44)) (i32.eq (local.get $c) (i32.const 125)))
                                (i32.or (i32.eq (local.get $c) (i32.const 93)) (i32.le_u (local.get $c) (i32.const 32)))))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $scalar)))
        (return (local.get $p))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $p) (local.get $to)))
        (local.set $c (i32.load8_u (local.get $p)))
        (if (i32.eq (local.get $c) (i32.const 34))
          (then (local.set $p (call $skipString (local.get $p) (local.get $to))) (br $next)))
        (if (i32.or (i32.eq (local.get $c) (i32.const 123)) (i32.eq (local.get $c) (i32.const 91)))
          (then (local.set $depth (i32.add (local.get $depth) (i32.const 1)))))
        (if (i32.or (i32.eq (local.get $c) (i32.const 125)) (i32.eq (local.get $c) (i32.const 93)))
          (then (local.set $depth (i32.sub (local.get $depth) (i32.const 1)))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br_if $done (i32.eqz (local.get $depth)))
        (br $next)))
    (local.get $p))

  ;; copy appends [src, src+n) at $dst and returns the new end.
  (func $copy (param $dst i32) (param $src i32) (param $n i32) (result i32)
    (memory.copy (local.get $dst) (local.get $src) (local.get $n))
    (i32.add (local.get $dst) (local.get $n)))

  (func (export "wagent_on_tool") (param $view_len i32) (result i32)
    (local $end i32) (local $word i32) (local $wlen i32) (local $p i32)
    (local $obj i32) (local $objEnd i32) (local $id i32) (local $idEnd i32)
    (local $args i32) (local $argsEnd i32) (local $o i32) (local $c i32)
    (local.set $end (call $view (global.get $buf) (global.get $cap)))
    (if (i32.gt_u (local.get $end) (global.get $cap))
      (then
        (drop (call $log (i32.const 3) (i32.const 256) (i32.const 43)))
        (return (i32.const 1))))
    (local.set $end (i32.add (global.get $buf) (local.get $end)))

    ;; The configured word; without one there is nothing to deny.
    (local.set $word (call $find (global.get $buf) (local.get $end) (i32.const 16) (i32.const 8)))
    (if (i32.lt_s (local.get $word) (i32.const 0)) (then (return (i32.const 0))))
    (local.set $word (i32.add (local.get $word) (i32.const 7)))   ;; at its opening quote
    (local.set $wlen (i32.sub (i32.sub (call $skipString (local.get $word) (local.get $end)) (local.get $word)) (i32.const 2)))
    (local.set $word (i32.add (local.get $word) (i32.const 1)))
    (if (i32.le_s (local.get $wlen) (i32.const 0)) (then (return (i32.const 0))))

    (local.set $p (call $find (global.get $buf) (local.get $end) (i32.const 32) (i32.const 9)))
    (if (i32.lt_s (local.get $p) (i32.const 0)) (then (return (i32.const 0))))
    (local.set $p (i32.add (local.get $p) (i32.const 9)))

    (local.set $o (i32.add (global.get $out) (i32.const 1)))       ;; after "["
    (block $calls_done
      (loop $each
        ;; Skip separators to the next call object, or the end of the list.
        (block $at
          (loop $ws
            (br_if $calls_done (i32.ge_u (local.get $p) (local.get $end)))
            (local.set $c (i32.load8_u (local.get $p)))
            (br_if $calls_done (i32.eq (local.get $c) (i32.const 93)))  ;; ]
            (br_if $at (i32.eq (local.get $c) (i32.const 123)))         ;; {
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $ws)))
        (local.set $obj (local.get $p))
        (local.set $objEnd (call $skipValue (local.get $p) (local.get $end)))
        (local.set $p (local.get $objEnd))
        ;; Leave alone calls already decided or running.
        (br_if $each (i32.ge_s (call $find (local.get $obj) (local.get $objEnd) (i32.const 80) (i32.const 11)) (i32.const 0)))
        (br_if $each (i32.ge_s (call $find (local.get $obj) (local.get $objEnd) (i32.const 96) (i32.const 14)) (i32.const 0)))
        (local.set $args (call $find (local.get $obj) (local.get $objEnd) (i32.const 64) (i32.const 12)))
        (br_if $each (i32.lt_s (local.get $args) (i32.const 0)))
        (local.set $args (i32.add (local.get $args) (i32.const 12)))
        (local.set $argsEnd (call $skipValue (local.get $args) (local.get $objEnd)))
        (br_if $each (i32.lt_s (call $find (local.get $args) (local.get $argsEnd) (local.get $word) (local.get $wlen)) (i32.const 0)))
        (local.set $id (call $find (local.get $obj) (local.get $objEnd) (i32.const 48) (i32.const 6)))
        (br_if $each (i32.lt_s (local.get $id) (i32.const 0)))
        (local.set $id (i32.add (local.get $id) (i32.const 5)))      ;; its opening quote
        (local.set $idEnd (i32.sub (call $skipString (local.get $id) (local.get $objEnd)) (i32.const 1)))
        (local.set $id (i32.add (local.get $id) (i32.const 1)))
        ;; {"kind":"decision","call_id":"ID","text":"denied … WORD"}
        (if (i32.gt_u (local.get $o) (i32.add (global.get $out) (i32.const 1)))
          (then (i32.store8 (local.get $o) (i32.const 44)) (local.set $o (i32.add (local.get $o) (i32.const 1)))))
        (local.set $o (call $copy (local.get $o) (i32.const 128) (i32.const 30)))
        (local.set $o (call $copy (local.get $o) (local.get $id) (i32.sub (local.get $idEnd) (local.get $id))))
        (local.set $o (call $copy (local.get $o) (i32.const 176) (i32.const 62)))
        (local.set $o (call $copy (local.get $o) (local.get $word) (local.get $wlen)))
        (i32.store16 (local.get $o) (i32.const 0x7d22))               ;; "}
        (local.set $o (i32.add (local.get $o) (i32.const 2)))
        (br $each)))
    (if (i32.gt_u (local.get $o) (i32.add (global.get $out) (i32.const 1)))
      (then
        (i32.store8 (global.get $out) (i32.const 91))                ;; [
        (i32.store8 (local.get $o) (i32.const 93))                   ;; ]
        (drop (call $effects (global.get $out) (i32.add (i32.sub (local.get $o) (global.get $out)) (i32.const 1))))))
    (i32.const 0))
)
