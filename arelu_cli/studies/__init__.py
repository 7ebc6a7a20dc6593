"""Studies: each a folder of stages (runs to train, outputs to make), tables read from files,
claims and a document."""
