#include "textflag.h"

// func fence()
TEXT ·fence(SB), NOSPLIT|NOFRAME, $0-0
	DMB	$0xb // DMB ISH: a full barrier for the inner shareable domain
	RET
