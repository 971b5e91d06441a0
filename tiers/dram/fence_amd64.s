#include "textflag.h"

// func fence()
TEXT ·fence(SB), NOSPLIT|NOFRAME, $0-0
	MFENCE
	RET
