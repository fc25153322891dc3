package standin

var Tokenize = tokenize
