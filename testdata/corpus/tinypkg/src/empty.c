/* Only declarations: no function bodies, so not a useful module. */
extern int declared_elsewhere(int);
