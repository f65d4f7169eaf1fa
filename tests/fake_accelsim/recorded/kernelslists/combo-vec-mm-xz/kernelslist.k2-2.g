MemcpyHtoD,0x00007fb02d700000,4096
MemcpyHtoD,0x00007fb02d701000,4096
kernel-2.traceg.xz
