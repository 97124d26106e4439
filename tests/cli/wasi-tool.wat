;; A small WASI preview1 command for the CLI tests. Its first argument
;; selects what it does:
;;   args        write each argument followed by "\n"
;;   env         write each environment variable followed by "\n"
;;   cat PATH    open PATH relative to the first preopen (fd 3), copy it to
;;               stdout; on failure exit with the errno as exit code
;;   prestat     write the name of preopen fd 3 followed by "\n"
;;   stdin       copy stdin to stdout
;;   exit N      proc_exit(N) (N is one decimal digit string, e.g. "3")
;;   trap        execute `unreachable`
;;   loop        loop forever
(module
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_get" (func $environ_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_prestat_get" (func $fd_prestat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_prestat_dir_name" (func $fd_prestat_dir_name (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open" (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 2)

  ;; Layout: 0x00 iovec, 0x08 nwritten/nread, 0x10 counts, 0x20 scratch,
  ;; 0x100.. pointer arrays, 0x1000.. string buffers, 0x8000.. I/O buffer.
  (data (i32.const 0x40) "\n")

  (func $check (param $errno i32)
    (if (local.get $errno) (then (call $proc_exit (local.get $errno)))))

  (func $write (param $fd i32) (param $ptr i32) (param $len i32)
    (i32.store (i32.const 0) (local.get $ptr))
    (i32.store (i32.const 4) (local.get $len))
    (call $check (call $fd_write (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8))))

  (func $strlen (param $p i32) (result i32)
    (local $n i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (i32.load8_u (i32.add (local.get $p) (local.get $n)))))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br $next)))
    (local.get $n))

  (func $streq (param $a i32) (param $b i32) (param $len i32) (result i32)
    (local $i i32)
    (block $no
      (loop $next
        (if (i32.eq (local.get $i) (local.get $len)) (then (return (i32.const 1))))
        (br_if $no (i32.ne (i32.load8_u (i32.add (local.get $a) (local.get $i)))
                           (i32.load8_u (i32.add (local.get $b) (local.get $i)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 0))

  ;; Writes each NUL-terminated string of the array at $ptrs ($count of them)
  ;; followed by "\n".
  (func $write_lines (param $ptrs i32) (param $count i32)
    (local $i i32) (local $s i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $count)))
        (local.set $s (i32.load (i32.add (local.get $ptrs) (i32.shl (local.get $i) (i32.const 2)))))
        (call $write (i32.const 1) (local.get $s) (call $strlen (local.get $s)))
        (call $write (i32.const 1) (i32.const 0x40) (i32.const 1))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next))))

  ;; Copies fd $fd to stdout until EOF.
  (func $copy (param $fd i32)
    (block $eof
      (loop $next
        (i32.store (i32.const 0) (i32.const 0x8000))
        (i32.store (i32.const 4) (i32.const 0x4000))
        (call $check (call $fd_read (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8)))
        (br_if $eof (i32.eqz (i32.load (i32.const 8))))
        (call $write (i32.const 1) (i32.const 0x8000) (i32.load (i32.const 8)))
        (br $next))))

  (func $arg (param $i i32) (result i32)
    (i32.load (i32.add (i32.const 0x100) (i32.shl (local.get $i) (i32.const 2)))))

  (func $is (param $s i32) (param $lit i32) (param $len i32) (result i32)
    (if (result i32) (i32.eq (call $strlen (local.get $s)) (local.get $len))
      (then (call $streq (local.get $s) (local.get $lit) (local.get $len)))
      (else (i32.const 0))))

  (data (i32.const 0x60) "args")
  (data (i32.const 0x68) "env")
  (data (i32.const 0x70) "cat")
  (data (i32.const 0x78) "prestat")
  (data (i32.const 0x80) "stdin")
  (data (i32.const 0x88) "exit")
  (data (i32.const 0x90) "trap")
  (data (i32.const 0x98) "loop")

  (func (export "_start")
    (local $argc i32) (local $cmd i32) (local $path i32)
    (call $check (call $args_sizes_get (i32.const 0x10) (i32.const 0x14)))
    (local.set $argc (i32.load (i32.const 0x10)))
    (call $check (call $args_get (i32.const 0x100) (i32.const 0x1000)))
    (if (i32.lt_u (local.get $argc) (i32.const 2)) (then (call $proc_exit (i32.const 100))))
    (local.set $cmd (call $arg (i32.const 1)))

    (if (call $is (local.get $cmd) (i32.const 0x60) (i32.const 4)) (then
      (call $write_lines (i32.const 0x100) (local.get $argc))
      (return)))

    (if (call $is (local.get $cmd) (i32.const 0x68) (i32.const 3)) (then
      (call $check (call $environ_sizes_get (i32.const 0x18) (i32.const 0x1c)))
      (call $check (call $environ_get (i32.const 0x400) (i32.const 0x4000)))
      (call $write_lines (i32.const 0x400) (i32.load (i32.const 0x18)))
      (return)))

    (if (call $is (local.get $cmd) (i32.const 0x70) (i32.const 3)) (then
      (if (i32.lt_u (local.get $argc) (i32.const 3)) (then (call $proc_exit (i32.const 101))))
      (local.set $path (call $arg (i32.const 2)))
      (call $check (call $path_open
        (i32.const 3) (i32.const 1) (local.get $path) (call $strlen (local.get $path))
        (i32.const 0) (i64.const 0x1fffffff) (i64.const 0x1fffffff) (i32.const 0) (i32.const 0x20)))
      (call $copy (i32.load (i32.const 0x20)))
      (return)))

    (if (call $is (local.get $cmd) (i32.const 0x78) (i32.const 7)) (then
      (call $check (call $fd_prestat_get (i32.const 3) (i32.const 0x20)))
      (call $check (call $fd_prestat_dir_name (i32.const 3) (i32.const 0x6000) (i32.load (i32.const 0x24))))
      (call $write (i32.const 1) (i32.const 0x6000) (i32.load (i32.const 0x24)))
      (call $write (i32.const 1) (i32.const 0x40) (i32.const 1))
      (return)))

    (if (call $is (local.get $cmd) (i32.const 0x80) (i32.const 5)) (then
      (call $copy (i32.const 0))
      (return)))

    (if (call $is (local.get $cmd) (i32.const 0x88) (i32.const 4)) (then
      (call $proc_exit (i32.sub (i32.load8_u (call $arg (i32.const 2))) (i32.const 48)))))

    (if (call $is (local.get $cmd) (i32.const 0x90) (i32.const 4)) (then unreachable))

    (if (call $is (local.get $cmd) (i32.const 0x98) (i32.const 4)) (then
      (loop $forever (br $forever))))

    (call $proc_exit (i32.const 102)))
)
