package kernels

import "os"

var osReadFile = os.ReadFile
