//go:build amd64 && !purego

#include "textflag.h"

// CRC-32C by carry-less folding, four 512-bit accumulators (256 bytes) per
// step; see checksum_fold.go for the algebra and the constants in the
// *foldTable the caller passes (loop pair at 0, final pairs at 16).
// The caller guarantees n is a non-zero multiple of 256. crc is the raw
// (uncomplemented) running value; the result is raw too.

// func foldUpdate(crc uint32, p *byte, n int, k *foldTable) uint32
TEXT ·foldUpdate(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), AX
	MOVQ p+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ k+24(FP), DX

	// The running value enters as an XOR into the first four bytes.
	VMOVD     AX, X4
	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VPXORQ    Z4, Z0, Z0
	VBROADCASTI32X4 0(DX), Z8
	ADDQ      $256, SI
	SUBQ      $256, CX
	JZ        reduce

loop:
	VPCLMULQDQ $0x00, Z8, Z0, Z4
	VPCLMULQDQ $0x11, Z8, Z0, Z0
	VPCLMULQDQ $0x00, Z8, Z1, Z5
	VPCLMULQDQ $0x11, Z8, Z1, Z1
	VPCLMULQDQ $0x00, Z8, Z2, Z6
	VPCLMULQDQ $0x11, Z8, Z2, Z2
	VPCLMULQDQ $0x00, Z8, Z3, Z7
	VPCLMULQDQ $0x11, Z8, Z3, Z3
	VPTERNLOGQ $0x96, 0(SI), Z4, Z0
	VPTERNLOGQ $0x96, 64(SI), Z5, Z1
	VPTERNLOGQ $0x96, 128(SI), Z6, Z2
	VPTERNLOGQ $0x96, 192(SI), Z7, Z3
	ADDQ       $256, SI
	SUBQ       $256, CX
	JNZ        loop

reduce:
	VMOVDQU64  16(DX), Z9
	VMOVDQU64  80(DX), Z10
	VMOVDQU64  144(DX), Z11
	VMOVDQU64  208(DX), Z12
	VPCLMULQDQ $0x00, Z9, Z0, Z4
	VPCLMULQDQ $0x11, Z9, Z0, Z0
	VPCLMULQDQ $0x00, Z10, Z1, Z5
	VPCLMULQDQ $0x11, Z10, Z1, Z1
	VPCLMULQDQ $0x00, Z11, Z2, Z6
	VPCLMULQDQ $0x11, Z11, Z2, Z2
	VPCLMULQDQ $0x00, Z12, Z3, Z7
	VPCLMULQDQ $0x11, Z12, Z3, Z3
	VPTERNLOGQ $0x96, Z4, Z1, Z0
	VPTERNLOGQ $0x96, Z5, Z2, Z0
	VPTERNLOGQ $0x96, Z6, Z3, Z0
	VPXORQ     Z7, Z0, Z0

	// Sum the four lanes into one 128-bit value congruent to everything
	// read so far, then take its CRC with the crc32 instruction.
	VEXTRACTI64X4 $1, Z0, Y1
	VPXOR         Y1, Y0, Y0
	VEXTRACTI128  $1, Y0, X1
	VPXOR         X1, X0, X0
	VMOVQ         X0, AX
	VPEXTRQ       $1, X0, BX
	VZEROUPPER
	XORL          CX, CX
	CRC32Q        AX, CX
	CRC32Q        BX, CX
	MOVL          CX, ret+32(FP)
	RET

// foldCopy is foldUpdate that also stores every 256 bytes it loads from
// src to dst, so the CRC is of exactly the bytes written.
// func foldCopy(crc uint32, dst, src *byte, n int, k *foldTable) uint32
TEXT ·foldCopy(SB), NOSPLIT, $0-44
	MOVL crc+0(FP), AX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX
	MOVQ k+32(FP), DX

	VMOVD     AX, X4
	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VMOVDQU64 Z3, 192(DI)
	VPXORQ    Z4, Z0, Z0
	VBROADCASTI32X4 0(DX), Z8
	ADDQ      $256, SI
	ADDQ      $256, DI
	SUBQ      $256, CX
	JZ        creduce

cloop:
	VMOVDQU64  0(SI), Z4
	VMOVDQU64  64(SI), Z5
	VMOVDQU64  128(SI), Z6
	VMOVDQU64  192(SI), Z7
	VMOVDQU64  Z4, 0(DI)
	VMOVDQU64  Z5, 64(DI)
	VMOVDQU64  Z6, 128(DI)
	VMOVDQU64  Z7, 192(DI)
	VPCLMULQDQ $0x00, Z8, Z0, Z9
	VPCLMULQDQ $0x11, Z8, Z0, Z0
	VPCLMULQDQ $0x00, Z8, Z1, Z10
	VPCLMULQDQ $0x11, Z8, Z1, Z1
	VPCLMULQDQ $0x00, Z8, Z2, Z11
	VPCLMULQDQ $0x11, Z8, Z2, Z2
	VPCLMULQDQ $0x00, Z8, Z3, Z12
	VPCLMULQDQ $0x11, Z8, Z3, Z3
	VPTERNLOGQ $0x96, Z4, Z9, Z0
	VPTERNLOGQ $0x96, Z5, Z10, Z1
	VPTERNLOGQ $0x96, Z6, Z11, Z2
	VPTERNLOGQ $0x96, Z7, Z12, Z3
	ADDQ       $256, SI
	ADDQ       $256, DI
	SUBQ       $256, CX
	JNZ        cloop

creduce:
	VMOVDQU64  16(DX), Z9
	VMOVDQU64  80(DX), Z10
	VMOVDQU64  144(DX), Z11
	VMOVDQU64  208(DX), Z12
	VPCLMULQDQ $0x00, Z9, Z0, Z4
	VPCLMULQDQ $0x11, Z9, Z0, Z0
	VPCLMULQDQ $0x00, Z10, Z1, Z5
	VPCLMULQDQ $0x11, Z10, Z1, Z1
	VPCLMULQDQ $0x00, Z11, Z2, Z6
	VPCLMULQDQ $0x11, Z11, Z2, Z2
	VPCLMULQDQ $0x00, Z12, Z3, Z7
	VPCLMULQDQ $0x11, Z12, Z3, Z3
	VPTERNLOGQ $0x96, Z4, Z1, Z0
	VPTERNLOGQ $0x96, Z5, Z2, Z0
	VPTERNLOGQ $0x96, Z6, Z3, Z0
	VPXORQ     Z7, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPXOR         Y1, Y0, Y0
	VEXTRACTI128  $1, Y0, X1
	VPXOR         X1, X0, X0
	VMOVQ         X0, AX
	VPEXTRQ       $1, X0, BX
	VZEROUPPER
	XORL          CX, CX
	CRC32Q        AX, CX
	CRC32Q        BX, CX
	MOVL          CX, ret+40(FP)
	RET
