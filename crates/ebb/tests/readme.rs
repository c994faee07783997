//! The README's example is examples/basic.rs, which `cargo test` compiles and
//! runs: here the two must say the same, so the README cannot drift from the API.

#[test]
fn readme_example_is_examples_basic_rs() {
    let readme = include_str!("../../../README.md");
    let block = readme
        .split_once("```rust\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(code, _)| code)
        .expect("README.md has a ```rust block");
    let example: String = include_str!("../examples/basic.rs")
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(block, example, "README.md's example and crates/ebb/examples/basic.rs differ");
}
