#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ebb_fuzz::blob_file(data));
