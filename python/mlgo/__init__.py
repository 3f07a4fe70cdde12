"""mlgo: train machine-learned optimization policies for stock LLVM."""
