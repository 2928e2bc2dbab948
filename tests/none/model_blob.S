/* model_blob.S — the .gbx named by GB_MODEL_PATH as read-only data,
 * 64-byte aligned, between gb_model_blob and gb_model_blob_end. */
    .section .rodata
    .balign 64
    .global gb_model_blob
    .global gb_model_blob_end
gb_model_blob:
    .incbin GB_MODEL_PATH
gb_model_blob_end:
    .section .note.GNU-stack,"",%progbits
