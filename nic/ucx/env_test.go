package ucx

import "os"

var getenv = os.Getenv
