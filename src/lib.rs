pub mod rank;
