package cdc

import "math/big"

func bigInt(x int64) *big.Int { return big.NewInt(x) }
