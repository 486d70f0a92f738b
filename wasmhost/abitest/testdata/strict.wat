;; strict: a command op that breaks "guests skip keys they do not know".
;; It expects the view to start with {"hook": and fails (status 1)
;; otherwise, so a view with a key a later minor added first is refused.
;; The conformance kit must fail it at command/unknown-keys.
(module
  (import "wagent" "view" (func $view (param i32 i32) (result i32)))
  (import "wagent" "effects" (func $effects (param i32 i32) (result i32)))
  (import "wagent" "log" (func $log (param i32 i32 i32) (result i32)))
  (memory (export "memory") 4)
  (data (i32.const 16) "{\22hook\22:")                                          ;; 8 bytes
  (data (i32.const 32) "[{\22kind\22:\22reply\22,\22text\22:\22ok\22}]")        ;; 30 bytes
  (data (i32.const 64) "strict: the view does not start with its hook")      ;; 45 bytes
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_command") (param $len i32) (result i32)
    (if (i32.gt_u (call $view (i32.const 1024) (i32.const 200000)) (i32.const 200000))
      (then (return (i32.const 1))))
    (if (i64.ne (i64.load (i32.const 1024)) (i64.load (i32.const 16)))
      (then
        (drop (call $log (i32.const 3) (i32.const 64) (i32.const 45)))
        (return (i32.const 1))))
    (drop (call $effects (i32.const 32) (i32.const 30)))
    (i32.const 0))
)
