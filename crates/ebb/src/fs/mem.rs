//! placeholder
pub struct MemFs;
pub enum CrashMode {}
pub enum FaultKind {}
pub enum FaultOp {}
