"""The catalogue of plantable bugs, and the code that plants and removes them."""
