"""A checkpoint and the point that writes it: layout (DLIO's rules), tensors, restore rules, the reshard map,
recovery, engines, object stores, the places a point writes, the point itself."""
