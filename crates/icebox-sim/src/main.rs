mod profile;
mod sim;
mod trace;
mod units;

fn main() {}
