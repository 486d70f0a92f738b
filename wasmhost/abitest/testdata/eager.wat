;; eager: a tool op that breaks "tool ops run only when asked". At the tool
;; hook it answers the first pending call with a result, whether or not the
;; host asked it to run that call (view.tool.run). The conformance kit must
;; fail it at tool/not-asked, where its own call is pending but not run.
(module
  (import "wagent" "view" (func $view (param i32 i32) (result i32)))
  (import "wagent" "effects" (func $effects (param i32 i32) (result i32)))
  (memory (export "memory") 8)
  (data (i32.const 16) "\22id\22:\22")                                            ;; 6 bytes
  (data (i32.const 32) "[{\22kind\22:\22result\22,\22content\22:\22done\22,\22call_id\22:\22") ;; 46 bytes
  (data (i32.const 96) "\22}]")                                                 ;; 3 bytes
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param $len i32) (result i32)
    (local $end i32) (local $p i32) (local $q i32) (local $o i32)
    (local.set $end (call $view (i32.const 1024) (i32.const 400000)))
    (if (i32.gt_u (local.get $end) (i32.const 400000)) (then (return (i32.const 1))))
    (local.set $end (i32.add (local.get $end) (i32.const 1024)))
    ;; The first "id":" in the view.
    (local.set $p (i32.const 1024))
    (block $found
      (loop $scan
        (if (i32.ge_u (i32.add (local.get $p) (i32.const 6)) (local.get $end)) (then (return (i32.const 0))))
        (br_if $found (i64.eq
          (i64.and (i64.load (local.get $p)) (i64.const 0xffffffffffff))
          (i64.and (i64.load (i32.const 16)) (i64.const 0xffffffffffff))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $scan)))
    (local.set $p (i32.add (local.get $p) (i32.const 6)))
    (local.set $q (local.get $p))
    (loop $id
      (if (i32.ne (i32.load8_u (local.get $q)) (i32.const 34))
        (then (local.set $q (i32.add (local.get $q) (i32.const 1))) (br $id))))
    ;; [{"kind":"result","content":"done","call_id":"ID"}]
    (local.set $o (i32.const 450000))
    (memory.copy (local.get $o) (i32.const 32) (i32.const 46))
    (memory.copy (i32.add (local.get $o) (i32.const 46)) (local.get $p) (i32.sub (local.get $q) (local.get $p)))
    (local.set $o (i32.add (i32.add (local.get $o) (i32.const 46)) (i32.sub (local.get $q) (local.get $p))))
    (memory.copy (local.get $o) (i32.const 96) (i32.const 3))
    (local.set $o (i32.add (local.get $o) (i32.const 3)))
    (drop (call $effects (i32.const 450000) (i32.sub (local.get $o) (i32.const 450000))))
    (i32.const 0))
)
