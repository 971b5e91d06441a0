#include "textflag.h"

// func Fence()
TEXT ·Fence(SB), NOSPLIT|NOFRAME, $0-0
	MFENCE
	RET
