/* gguf_blob.S — the GGUF named by GB_GGUF_PATH as read-only data, 64-byte
 * aligned, between gb_gguf_blob and gb_gguf_blob_end. */
    .section .rodata
    .balign 64
    .global gb_gguf_blob
    .global gb_gguf_blob_end
gb_gguf_blob:
    .incbin GB_GGUF_PATH
gb_gguf_blob_end:
    .section .note.GNU-stack,"",%progbits
