#include "textflag.h"

// func Fence()
TEXT ·Fence(SB), NOSPLIT|NOFRAME, $0-0
	DMB	$0xb // DMB ISH: a full barrier for the inner shareable domain
	RET
