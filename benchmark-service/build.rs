//! Generates the volo-thrift code of the volo player (`src/players/volo.rs`) from
//! `thrift/benchmark.thrift` into `$OUT_DIR/volo_gen.rs`, with volo-build (pilota): a pure-Rust
//! Thrift compiler, so the build needs no external tool.

fn main() {
    println!("cargo:rerun-if-changed=thrift/benchmark.thrift");
    println!("cargo:rerun-if-changed=build.rs");
    if let Err(e) = volo_build::Builder::thrift()
        .add_service("thrift/benchmark.thrift")
        .write()
    {
        panic!("volo-build could not generate the volo player's code from thrift/benchmark.thrift: {e:#}");
    }
}
