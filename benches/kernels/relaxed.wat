;; Relaxed-SIMD kernel: fused multiply-adds over two f32 arrays of 32 Ki
;; elements and an 8-bit dot product over 32 KiB, with the relaxed
;; instructions, repeated $n times. Returns the bits of both accumulators
;; folded into an i64; both engines compile each relaxed instruction to the
;; same instruction on one machine, so they return the same value.
(module
  (memory 5)
  (func (export "run") (param $n i32) (result i64)
    (local $i i32) (local $round i32) (local $facc v128) (local $iacc v128)
    ;; a at 0, b at 0x20000 (f32); x at 0x40000 (i8), y at 0x48000 (i7).
    (local.set $i (i32.const 0))
    (loop $init
      (f32.store (local.get $i) (f32.convert_i32_u (i32.and (local.get $i) (i32.const 255))))
      (f32.store offset=0x20000 (local.get $i) (f32.const 0.5))
      (local.set $i (i32.add (local.get $i) (i32.const 4)))
      (br_if $init (i32.lt_u (local.get $i) (i32.const 0x20000))))
    (local.set $i (i32.const 0))
    (loop $init_bytes
      (i32.store8 offset=0x40000 (local.get $i) (i32.mul (local.get $i) (i32.const 37)))
      (i32.store8 offset=0x48000 (local.get $i)
        (i32.and (i32.mul (local.get $i) (i32.const 11)) (i32.const 127)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $init_bytes (i32.lt_u (local.get $i) (i32.const 0x8000))))
    (loop $rounds
      (local.set $facc (v128.const f32x4 0 0 0 0))
      (local.set $i (i32.const 0))
      (loop $vec
        ;; facc += a * b
        (local.set $facc
          (f32x4.relaxed_madd (v128.load (local.get $i))
            (v128.load offset=0x20000 (local.get $i)) (local.get $facc)))
        ;; b -= a * 0.001
        (v128.store offset=0x20000 (local.get $i)
          (f32x4.relaxed_nmadd (v128.load (local.get $i))
            (v128.const f32x4 0.001 0.001 0.001 0.001)
            (v128.load offset=0x20000 (local.get $i))))
        ;; iacc += dot(x, y), over the byte arrays' first 32 KiB
        (local.set $iacc
          (i32x4.relaxed_dot_i8x16_i7x16_add_s
            (v128.load offset=0x40000 (i32.and (local.get $i) (i32.const 0x7ff0)))
            (v128.load offset=0x48000 (i32.and (local.get $i) (i32.const 0x7ff0)))
            (local.get $iacc)))
        (local.set $i (i32.add (local.get $i) (i32.const 16)))
        (br_if $vec (i32.lt_u (local.get $i) (i32.const 0x20000))))
      (local.set $round (i32.add (local.get $round) (i32.const 1)))
      (br_if $rounds (i32.lt_u (local.get $round) (local.get $n))))
    (i64.or
      (i64.shl
        (i64.extend_i32_u
          (i32.reinterpret_f32
            (f32.add
              (f32.add (f32x4.extract_lane 0 (local.get $facc)) (f32x4.extract_lane 1 (local.get $facc)))
              (f32.add (f32x4.extract_lane 2 (local.get $facc)) (f32x4.extract_lane 3 (local.get $facc))))))
        (i64.const 32))
      (i64.extend_i32_u
        (i32.add
          (i32.add (i32x4.extract_lane 0 (local.get $iacc)) (i32x4.extract_lane 1 (local.get $iacc)))
          (i32.add (i32x4.extract_lane 2 (local.get $iacc)) (i32x4.extract_lane 3 (local.get $iacc))))))))
