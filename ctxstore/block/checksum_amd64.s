//go:build amd64 && !purego

#include "textflag.h"

// CRC-32C by carry-less folding, four 512-bit accumulators (256 bytes) per
// step; see checksum_fold.go for the algebra and the constants in the
// *foldTable the caller passes (loop pair at 0, final pairs at 16).
// The caller guarantees n is a non-zero multiple of 256. crc is the raw
// (uncomplemented) running value; the result is raw too.
//
// Registers: Z0-Z3 the accumulators, Z8 the loop pair broadcast to every
// lane, SI the source, DI the destination (copies), CX the bytes left, DX
// the table.

// FOLD folds accumulator A forward by 256 bytes with the pair in K and XORs
// in D (a register or memory operand); T is a scratch register.
#define FOLD(A, K, D, T) \
	VPCLMULQDQ $0x00, K, A, T \
	VPCLMULQDQ $0x11, K, A, A \
	VPTERNLOGQ $0x96, D, T, A

// REDUCE folds the sixteen lanes of Z0-Z3 onto one with the final pairs,
// sums them into X0 and leaves the raw CRC of that 128-bit value (which is
// congruent to everything read) in CX, by the crc32 instruction.
#define REDUCE \
	VMOVDQU64  16(DX), Z9 \
	VMOVDQU64  80(DX), Z10 \
	VMOVDQU64  144(DX), Z11 \
	VMOVDQU64  208(DX), Z12 \
	VPCLMULQDQ $0x00, Z9, Z0, Z4 \
	VPCLMULQDQ $0x11, Z9, Z0, Z0 \
	VPCLMULQDQ $0x00, Z10, Z1, Z5 \
	VPCLMULQDQ $0x11, Z10, Z1, Z1 \
	VPCLMULQDQ $0x00, Z11, Z2, Z6 \
	VPCLMULQDQ $0x11, Z11, Z2, Z2 \
	VPCLMULQDQ $0x00, Z12, Z3, Z7 \
	VPCLMULQDQ $0x11, Z12, Z3, Z3 \
	VPTERNLOGQ $0x96, Z4, Z1, Z0 \
	VPTERNLOGQ $0x96, Z5, Z2, Z0 \
	VPTERNLOGQ $0x96, Z6, Z3, Z0 \
	VPXORQ     Z7, Z0, Z0 \
	VEXTRACTI64X4 $1, Z0, Y1 \
	VPXOR      Y1, Y0, Y0 \
	VEXTRACTI128 $1, Y0, X1 \
	VPXOR      X1, X0, X0 \
	VMOVQ      X0, AX \
	VPEXTRQ    $1, X0, BX \
	VZEROUPPER \
	XORL       CX, CX \
	CRC32Q     AX, CX \
	CRC32Q     BX, CX

// LOAD4 loads the first 256 bytes into the accumulators and XORs the
// running value (AX) into the first four bytes; STORE, when not a no-op,
// stores them to DI first.
#define LOAD4(STORE) \
	VMOVD     AX, X4 \
	VMOVDQU64 0(SI), Z0 \
	VMOVDQU64 64(SI), Z1 \
	VMOVDQU64 128(SI), Z2 \
	VMOVDQU64 192(SI), Z3 \
	STORE(Z0, Z1, Z2, Z3) \
	VPXORQ    Z4, Z0, Z0 \
	VBROADCASTI32X4 0(DX), Z8

#define NOSTORE(A, B, C, D)

#define STOREU(A, B, C, D) \
	VMOVDQU64 A, 0(DI) \
	VMOVDQU64 B, 64(DI) \
	VMOVDQU64 C, 128(DI) \
	VMOVDQU64 D, 192(DI)

// STORENT stores past the cache, as the runtime's memmove does for large
// copies; DI must be 64-byte aligned.
#define STORENT(A, B, C, D) \
	VMOVNTDQ A, 0(DI) \
	VMOVNTDQ B, 64(DI) \
	VMOVNTDQ C, 128(DI) \
	VMOVNTDQ D, 192(DI)

// COPYLOOP is the fused loop: load 256 bytes, store them with STORE, fold
// them in; then REDUCE.
#define COPYLOOP(STORE, LOOP, DONE) \
	LOAD4(STORE) \
	ADDQ $256, SI \
	ADDQ $256, DI \
	SUBQ $256, CX \
	JZ   DONE \
LOOP: \
	VMOVDQU64 0(SI), Z4 \
	VMOVDQU64 64(SI), Z5 \
	VMOVDQU64 128(SI), Z6 \
	VMOVDQU64 192(SI), Z7 \
	STORE(Z4, Z5, Z6, Z7) \
	FOLD(Z0, Z8, Z4, Z9) \
	FOLD(Z1, Z8, Z5, Z10) \
	FOLD(Z2, Z8, Z6, Z11) \
	FOLD(Z3, Z8, Z7, Z12) \
	ADDQ $256, SI \
	ADDQ $256, DI \
	SUBQ $256, CX \
	JNZ  LOOP \
DONE: \
	REDUCE

// func foldUpdate(crc uint32, p *byte, n int, k *foldTable) uint32
TEXT ·foldUpdate(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), AX
	MOVQ p+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ k+24(FP), DX
	LOAD4(NOSTORE)
	ADDQ $256, SI
	SUBQ $256, CX
	JZ   reduce

loop:
	FOLD(Z0, Z8, 0(SI), Z4)
	FOLD(Z1, Z8, 64(SI), Z5)
	FOLD(Z2, Z8, 128(SI), Z6)
	FOLD(Z3, Z8, 192(SI), Z7)
	ADDQ $256, SI
	SUBQ $256, CX
	JNZ  loop

reduce:
	REDUCE
	MOVL CX, ret+32(FP)
	RET

// func foldCopy(crc uint32, dst, src *byte, n int, k *foldTable, nt bool) uint32
TEXT ·foldCopy(SB), NOSPLIT, $0-52
	MOVL crc+0(FP), AX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX
	MOVQ k+32(FP), DX
	CMPB nt+40(FP), $0
	JNE  nontemporal
	COPYLOOP(STOREU, cloop, cdone)
	MOVL CX, ret+48(FP)
	RET

nontemporal:
	COPYLOOP(STORENT, ntloop, ntdone)
	SFENCE
	MOVL CX, ret+48(FP)
	RET
