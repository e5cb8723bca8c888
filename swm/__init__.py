"""TRiSK shallow-water model on meshops operators."""
