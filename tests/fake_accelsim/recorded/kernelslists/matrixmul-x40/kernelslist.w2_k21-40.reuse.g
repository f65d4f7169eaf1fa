MemcpyHtoD,0x00007fb02d700000,4096
kernel-1.traceg.xz
MemcpyHtoD,0x00007fb02d700000,4096
kernel-1.traceg.xz
MemcpyHtoD,0x00007fb02d700000,4096
kernel-1.traceg.xz
MemcpyHtoD,0x00007fb02d700000,4096
kernel-1.traceg.xz
